-- Score and signature of the documents in a within-dump cluster (the registered `involved` ids).
SELECT d.id, d.score, d.signature
FROM current_documents AS d
JOIN involved AS i USING (id);
