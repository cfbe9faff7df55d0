-- q0, pass-through: every bid, as it comes. Measures the source and the runtime.
SELECT auction, bidder, price, date_time, extra FROM bid;
