package planner

// Reads is how the planner reads the credentials of the appIds due under one identity.
type Reads int

const (
	// InLists names the appIds in lists of graph.MaxInList, ten lists a $batch.
	InLists Reads = iota
	// FullListing lists every application and service principal of the tenant, 999 a page.
	FullListing
)

// What Graph takes in one list and one $batch of lists, and returns in one page of a full listing.
const (
	appIDsPerList  = 15
	listsPerBatch  = 10
	objectsPerPage = 999
)

// ChooseReads says how to read due appIds in a tenant of apps applications and sps service
// principals, as a full listing or a tenant scan with the same identity last counted them (zero
// when none has): one full listing when the identity may list the tenant and the listing costs
// fewer resource units and fewer requests than the lists. Each list and each page costs about a
// unit; the lists go ten to a request and the pages one, so a listing wins once the due appIds
// are about a sixth of the tenant, and never against a tenant of unknown size.
func ChooseReads(due, apps, sps int, mayList bool) Reads {
	if !mayList || due <= 0 || apps+sps == 0 {
		return InLists
	}
	lists := 2 * ceilDiv(due, appIDsPerList)
	listRequests := ceilDiv(lists, listsPerBatch)
	pages := ceilDiv(apps, objectsPerPage) + ceilDiv(sps, objectsPerPage)
	if pages < lists && pages < listRequests {
		return FullListing
	}
	return InLists
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// deltaPage is how many objects a page of a delta round holds.
const deltaPage = 100

// ChooseDelta says whether the checks of an identity whose watches know their credentials are
// answered from Graph's changes to the tenant (a delta round) instead of read: when every watch
// that asked may list the tenant, and a round, which costs a request for each collection and
// one more for each page of the objects the last round reported, costs fewer resource units
// than the lists that read watched appIds. A round reads the changes of the whole tenant, so a
// tenant that changes faster than its watched applications are read is read by lists.
func ChooseDelta(watched, reported int, mayList bool) bool {
	if !mayList || watched <= 0 {
		return false
	}
	round := 2 + ceilDiv(reported, deltaPage)
	lists := 2 * ceilDiv(watched, appIDsPerList)
	return round < lists
}

// ChooseScanDelta says whether a tenant scan of a tenant of apps applications and sps service
// principals, held from an earlier scan, reads the round of changes since rather than list the
// tenant again: when the round, as costly as the last one (reported objects), takes no more
// requests than the listing's pages. A tenant that changes faster is listed, and its next round
// starts from then.
func ChooseScanDelta(apps, sps, reported int) bool {
	round := 2 + ceilDiv(reported, deltaPage)
	listing := ceilDiv(apps, objectsPerPage) + ceilDiv(sps, objectsPerPage)
	return round <= max(listing, 2)
}
