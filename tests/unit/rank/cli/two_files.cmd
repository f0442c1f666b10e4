games.csv tie.csv -k 1
