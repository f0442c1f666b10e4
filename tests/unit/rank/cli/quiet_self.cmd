self.csv -k 1 --quiet
