package b

func (T) NotCounted() {}
