games.csv -k
