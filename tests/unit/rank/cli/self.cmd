self.csv -k 1
