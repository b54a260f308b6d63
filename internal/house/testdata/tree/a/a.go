package a

type T struct{}

func (T) One()  {}
func (*T) Two() {}

type G[P any] struct{}

func (G[P]) One()  {}
func (*G[P]) Two() {}

func NotAMethod() {}
