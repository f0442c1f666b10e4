optimizer{"op":"sgd","params":421642}[16][]  4.2
optimizer{"op":"sgd","params":1000}[16][]  4.2
