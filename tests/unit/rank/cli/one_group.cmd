one_group.csv --all
