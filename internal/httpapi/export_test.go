package httpapi

// RoutesOf lists the routes that New serves for c.
func RoutesOf(c Config) []Route { return newServer(c).routes() }
