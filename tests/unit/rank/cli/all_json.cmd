games.csv --all --json
