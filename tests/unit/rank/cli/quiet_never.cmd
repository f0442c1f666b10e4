never.csv --all --quiet
