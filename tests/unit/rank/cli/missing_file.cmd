nope.csv -k 1
