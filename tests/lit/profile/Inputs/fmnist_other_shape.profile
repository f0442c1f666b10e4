layer{"name":"conv1","op":"conv2d"}[8][3,28,28]  1.0 2.0
