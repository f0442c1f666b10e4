two_unbeaten.csv -k 1 --regularize 0.5
