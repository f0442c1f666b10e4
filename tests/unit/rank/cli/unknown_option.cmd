games.csv -k 1 --fast
