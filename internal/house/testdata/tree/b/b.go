package b

type T int

func (T) One() {}
