module usher

go 1.26.8
