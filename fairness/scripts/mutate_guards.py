# Removes each rule guard of the scheduler in turn and runs the test named after
# that rule, which must fail; restores the file afterwards. Run from anywhere:
#   python3 fairness/scripts/mutate_guards.py [name-filter...]
import sys, subprocess, shutil
import os
root = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..'))
path = os.path.join(root, 'fairness', 'src', 'scheduler.rs')
muts = [
 ("M1a floor advance", "        g.fl.floor = g.fl.floor.max(t_start);", "", "rule1_unready_or_capped_tenants_do_not_freeze_the_floor"),
 ("M1b skip unservable", "            if !pass.admits(h, sel.claimed[i], now) {\n                continue;\n            }", "", "rule1_unready_or_capped_tenants_take_no_capacity_and_keep_their_place"),
 ("M2 keep debt", "if e.fresh || e.tag <= floor || forgiven {", "if e.fresh || true || forgiven {", "rule2_drained_tenant_returns_with_its_tag"),
 ("M3 line stacking", "let tag = if established && self.waiting > 0 {", "let tag = if false {", "rule3_fresh_tenants_neither_pin_the_floor_nor_starve_the_backlog"),
 ("M3b capped counts as established", "established = !t.fresh && can;", "established = !t.fresh;", "rule3_a_capped_incumbent_does_not_line_up_simultaneous_newcomers"),
 ("M4a stamp tie-break", "let key = (self.start_of(t, g), order_stamp(t), i);", "let key = (self.start_of(t, g), u64::from(h.tenant), i);", "rule4_ties_break_by_waiting_order_not_tenant_id"),
 ("M4b oldest-first fallback", "let key = (self.start_of(t, g), order_stamp(t), i);", "let key = (h.rows[0].due_at, order_stamp(t), i);", "rule4_no_fallback_to_oldest_first"),
 ("M4d established first at equal tags", "    if t.fresh {\n        t.stamp\n    } else {\n        t.stamp | (1 << 63)\n    }", "    t.stamp", "rule4_a_tenant_never_served_goes_first_among_equal_tags"),
 ("M4c back from backoff keeps its stamp", "back = can && !t.fresh && t.due_tick + 1 < tick;", "back = false;", "rule4_a_tenant_back_from_backoff_waits_behind_those_already_waiting"),
 ("M5a skip only the tenant", "                self.skipped_for_bytes(h, row.size, limits);\n                self.requeue_group(&mut groups, &slots, slot, gid);\n                continue;", "                break;", "rule5_work_conserving_past_rows_that_do_not_fit"),
 ("M5b oversize alone", "|| oversize_alone(size, limits, sel.rows_total)", "", "rule5_work_conserving_past_rows_that_do_not_fit"),
 ("M5e large rows wait for freed bytes to add up", "    size > limits.bytes && claimed == 0 && limits.bytes > 0", "    size > limits.bytes && claimed == 0 && limits.bytes > 1 << 40", "rule5_large_rows_get_their_bytes_under_an_inflight_bound"),
 ("M5f a full bound still claims", "    size > limits.bytes && claimed == 0 && limits.bytes > 0", "    size > limits.bytes && claimed == 0", "rule5_large_rows_get_their_bytes_under_an_inflight_bound"),
 ("M5c skipped lag written off", "                self.skipped_for_bytes(h, row.size, limits);\n", "", "rule5_a_tenant_skipped_for_bytes_keeps_its_lag"),
 ("M5g group's kept floor", "        g.skipped_tick = tick;\n", "", "rule5_a_group_skipped_for_bytes_keeps_its_lag"),
 ("M5d kept floor ignored", "    if t.skipped_tick != 0 && t.skipped_tick + 1 >= tick {", "    if false {", "rule5_a_tenant_skipped_for_bytes_keeps_its_lag"),
 ("M6a ceiling", "while self.tenants.map.len() > self.cfg.max_tenants {", "while false && self.tenants.map.len() > self.cfg.max_tenants {", "rule6_state_is_bounded_by_the_ceiling_and_the_sweep"),
 ("M6b sweep", "if e.fresh || e.tag <= floor || forgiven {", "if false {", "rule6_state_is_bounded_by_the_ceiling_and_the_sweep"),
 ("M2b paused tenant back without the floor", "    } else {\n        group_floor\n    }", "    } else {\n        0\n    }", "rule2_a_paused_tenant_holds_no_floor_and_gets_no_credit_back"),
 ("M8a no spare pass", "            if sel.rows_left > sp.reserve {\n                self.fill(", "            if false {\n                self.fill(", "rule8_a_lone_tenant_uses_idle_slots_up_to_the_ceiling"),
 ("M8b reserve ignored", "            Pass::Spare(sp) => sp.reserve,", "            Pass::Spare(_) => 0,", "rule8_a_lone_tenant_uses_idle_slots_up_to_the_ceiling"),
 ("M8c ceiling ignored by the fair pass", "servable(h, k, now) && h.inflight.saturating_add(k) < ceiling", "servable(h, k, now) && ceiling > 0", "rule8_a_lone_tenant_uses_idle_slots_up_to_the_ceiling"),
 ("M8d fair pass runs to the ceiling", "servable(h, k, now) && h.inflight.saturating_add(k) < ceiling", "h.rows.get(k as usize).is_some_and(|r| r.ready(now)) && h.inflight.saturating_add(k) < ceiling", "rule8_a_newcomer_is_served_first_and_gets_its_share_as_borrowed_rows_finish"),
 ("M9 group weight", "let group_cost = self.row_cost(size, h.group_weight, limits);\n        let t_stamp", "let group_cost = self.row_cost(size, 1, limits);\n        let t_stamp", "a_groups_weight_is_its_share_among_the_groups"),
 ("M10 caller's fit", "let taken = if in_budget { fits(offer) } else { None };", "let taken = if in_budget { fits(offer).or(Some(row.size)) } else { None };", "a_row_the_caller_refuses_is_not_claimed_and_not_charged"),
 ("M11 bytes of the row taken", "sel.bytes_left = sel.bytes_left.saturating_sub(u64::from(taken));", "sel.bytes_left = sel.bytes_left.saturating_sub(size);", "the_bytes_and_the_charge_are_the_claimed_rows"),
 ("M7 sweep budget", "        while steps < budget {", "        while steps < usize::MAX {", "rule7_tick_cost_scales_with_tenants_due_now"),
]
only = sys.argv[1:] 
orig = open(path).read()
# Put back the file's times as well as its text: cargo judges a file changed
# by its mtime, and a scheduler.rs touched by this script made the next
# `make test` rebuild every crate above the fairness one (about 150 s).
stat = os.stat(path)
missed = 0
try:
    for name, a, b, test in muts:
        if only and not any(o in name for o in only): continue
        # Exactly once: a second site would make the mutation land where no test looks.
        assert orig.count(a) == 1, (name, orig.count(a))
        open(path,'w').write(orig.replace(a, b, 1))
        # Serialized with other builds on the machine, in the shared target dir.
        # MUTATE_CARGO may name another wrapper (it gets cargo's arguments).
        wrap = os.environ.get("MUTATE_CARGO")
        cmd = [wrap] if wrap else ["flock","/tmp/ankusa-cargo.lock","cargo"]
        r = subprocess.run(cmd+["test","-q","-p","ankusa-fairness","--lib","scheduler::tests::"+test,"--","--exact"],
            cwd=root, env={**os.environ, "CARGO_TARGET_DIR":os.environ.get("CARGO_TARGET_DIR","/var/tmp/ankusa-target")}, capture_output=True, text=True)
        out = r.stdout + r.stderr
        status = "FAILS (guard detected)" if r.returncode != 0 else "PASSES (guard NOT detected)"
        if "error[" in out: status = "COMPILE ERROR"
        if r.returncode == 0 or "error[" in out: missed += 1
        msg = [l for l in out.splitlines() if "panicked" in l or "assert" in l.lower()][:2]
        print(f"{name:28} -> {test}: {status} {msg}", flush=True)
finally:
    open(path,'w').write(orig)
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
sys.exit(1 if missed else 0)
