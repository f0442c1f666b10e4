games.csv --simulate n=30
