module example.com/house

go 1.26
