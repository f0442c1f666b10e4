games.csv -k 2
