optimizer{"params":100}[8][]  0.5
optimizer{"op":"sgd"}[8][]  0.5
optimizer{"op":"lbfgs","params":100}[8][]  0.5
optimizer{"op":"sgd","params":0}[8][]  0.5
optimizer{"op":"sgd","params":100}[8][]  0.5 0.1 0.2
optimizer{"op":"sgd","params":100}[8][]  inf
