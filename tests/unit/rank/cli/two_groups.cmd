two_groups.csv -k 2
