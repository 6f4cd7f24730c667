// Command server runs the demo shop's HTTP API.
package main

import (
	"encoding/json"
	"log"
	"net/http"
)

// Product is an item of the catalogue.
type Product struct {
	ID    string  `json:"id"`
	Name  string  `json:"name"`
	Price float64 `json:"price"`
}

// Server holds the catalogue and serves it over HTTP.
type Server struct {
	products []Product
}

// ListProducts writes the catalogue as JSON.
func (s *Server) ListProducts(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(s.products)
}

// StartServer registers the routes and listens on port 8080.
func StartServer(s *Server) error {
	http.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("ok")) })
	http.HandleFunc("/products", s.ListProducts)
	return http.ListenAndServe(":8080", nil)
}

func main() {
	s := &Server{products: []Product{{ID: "p1", Name: "Teapot", Price: 18.5}}}
	log.Fatal(StartServer(s))
}
