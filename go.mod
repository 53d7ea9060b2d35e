module prefixd

go 1.26
