names.csv --all --csv
