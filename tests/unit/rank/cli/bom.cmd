bom.csv --all --csv
