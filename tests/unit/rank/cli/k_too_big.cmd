games.csv -k 9
