module github.com/quotad/quotad/client

go 1.26
