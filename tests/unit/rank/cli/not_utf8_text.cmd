not_utf8.csv --all
