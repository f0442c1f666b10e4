malformed.csv -k 1
