//! Cursor-paged listings (`weft ls`, `weft evidence ls`): the filters a command was given,
//! and a walk over every page of the answer.

/// The filters that were given, as query pairs.
pub(super) fn given<const N: usize>(
    pairs: [(&'static str, Option<String>); N],
) -> Vec<(&'static str, String)> {
    pairs
        .into_iter()
        .filter_map(|(name, value)| Some((name, value?)))
        .collect()
}

/// Walks every page of a cursor-paged listing (`after` = the previous page's `next`).
pub(super) async fn each_page<T, F, Fut>(
    filters: &[(&'static str, String)],
    mut fetch: F,
    mut each: impl FnMut(&T) -> anyhow::Result<()>,
) -> anyhow::Result<()>
where
    F: FnMut(Vec<(&'static str, String)>) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<(Vec<T>, Option<u64>)>>,
{
    let mut after: Option<u64> = None;
    loop {
        let mut page_filters = filters.to_vec();
        if let Some(after) = after {
            page_filters.push(("after", after.to_string()));
        }
        let (items, next) = fetch(page_filters).await?;
        for item in &items {
            each(item)?;
        }
        match next {
            Some(next) => after = Some(next),
            None => return Ok(()),
        }
    }
}
