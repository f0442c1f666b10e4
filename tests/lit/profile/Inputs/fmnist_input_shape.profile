layer{"name":"x","op":"input"}[16][1,28,28]  0.5 0
