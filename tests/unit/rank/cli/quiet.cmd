games.csv -k 1 --quiet
