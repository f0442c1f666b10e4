chain.csv -k 3
