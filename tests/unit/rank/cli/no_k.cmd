games.csv
