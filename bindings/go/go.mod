module github.com/smartdev/smartdev/bindings/go

go 1.19
