two_unbeaten.csv -k 1
