control.csv --all
