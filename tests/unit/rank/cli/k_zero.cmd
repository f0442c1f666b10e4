games.csv -k 0
