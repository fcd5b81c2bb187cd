-- Schema version 7 of the demo database.
CREATE TABLE IF NOT EXISTS orders (
  id BIGINT PRIMARY KEY,
  placed_at TIMESTAMP NOT NULL,
  total_cents BIGINT NOT NULL
);
