empty.csv -k 1
