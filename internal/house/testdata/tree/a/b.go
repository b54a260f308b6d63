package a

func (t *T) Three() {}
