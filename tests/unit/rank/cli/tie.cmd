tie.csv -k 2
