games.csv -k 2 --verbose --threads 1
