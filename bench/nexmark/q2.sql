-- q2, selection: the bids on a set of auctions (a filter that keeps about 0.8 %).
SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0;
