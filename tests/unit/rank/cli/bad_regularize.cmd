games.csv -k 2 --regularize -1
