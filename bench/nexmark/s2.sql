-- s2, the state of a regular join (rsql's own, not a Nexmark query): each bid with its
-- auction's seller and category, no time bound and no TTL, so the join keeps every bid and
-- every auction (3.1 M and 0.2 M rows at 3.4 M events) under 0.2 M keys.
SELECT B.auction, B.bidder, B.price, A.seller, A.category
FROM bid B JOIN auction A ON B.auction = A.id;
