never.csv --all
