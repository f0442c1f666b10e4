disconnected.csv -k 2
